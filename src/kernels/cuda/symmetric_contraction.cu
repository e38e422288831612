// SPDX-License-Identifier: MIT
// Hand-written CUDA of the symmetric contraction (kernels/symmetric_contraction.hpp; seed
// section 4.3, Algorithm 3).
//
// Thread mapping: one warp per (node, 32-channel tile), lane = channel. The folded
// coefficients coef[element][entry][channel] are then read as 32 consecutive values per entry,
// and they stream in entry order because the host stores the entries in the order the kernel
// visits them.
//
// Monomials: the kernel walks only the monomials that some entry reads (and their prefixes), in
// depth-first pre-order of the prefix tree. In that order a monomial's ancestors are exactly
// the current path, so each lane keeps the path's prefix products in registers (correlation
// <= 4 of them) and every monomial costs one multiplication; no monomial array exists (968
// monomials x 32 lanes in double would not fit in shared memory). The reverse pass walks the
// same order and finishes a node's gradient when the walk leaves its subtree: the exact
// product rule with the same register stack.
//
// Per-warp shared memory holds the lane's inputs as columns [ell][lane] (conflict-free reads
// at run-time indices) and its accumulators [out component][lane]. Feature rows are read and
// written as contiguous, coalesced blocks per irreps entry.
//
// The weight gradient sums over the nodes of each element without atomics: nodes are grouped
// by element on the host in chunks; each (chunk, tile) warp owns its partial sums, and a
// second pass adds the chunks of each element in a fixed order.
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/symmetric_contraction_cuda.hpp"

namespace fastmlip::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kThreads = launch::kEdgeThreads;  // four independent warps per block
constexpr int kWarpsPerBlock = kThreads / kWarp;
constexpr int kMaxCorr = 4;                   // SymmetricContraction::from_mace accepts 1..4
constexpr int kMaxEll = 64;                   // per-warp shared columns, and the walk word's 8-bit field
constexpr int kMaxEntriesIO = 16;             // irreps entries in and out (kernel-parameter space)
constexpr int kMaxWalkCount = (1 << 20) - 1;  // entries of one monomial (walk word's 20-bit field)
// Nodes per chunk of the weight gradient: enough work per warp to amortise its partial-sum
// row, small enough that a few hundred nodes still fill the device.
constexpr int kNodesPerChunk = 32;

// A contiguous block of one irreps entry in a feature row: channel c's components sit at
// offset + c * dim + m, and component m is column base + m of the warp's shared columns.
struct Block {
  int offset, dim, base;
};

struct SCArgs {
  int channels, tiles, num_ell, out_per_channel, num_entries, num_walk, num_elements;
  int num_in, num_out, dim_in, dim_out;
  int table_bytes;  // walk words then entry columns, 16-byte aligned
  Block in[kMaxEntriesIO];
  Block out[kMaxEntriesIO];
};
static_assert(sizeof(SCArgs) + 256 < 4096, "SCArgs must fit the 4 KiB kernel-parameter space");

// Walk word: depth (3 bits) | last ell (8 bits) | number of entries on this monomial (20 bits).
__host__ __device__ constexpr int walk_word(int depth, int last, int count) {
  return depth | (last << 3) | (count << 11);
}

template <class T>
__device__ __forceinline__ T quiet_nan();
template <>
__device__ __forceinline__ float quiet_nan<float>() {
  return __int_as_float(0x7fc00000);
}
template <>
__device__ __forceinline__ double quiet_nan<double>() {
  return __longlong_as_double(0x7ff8000000000000LL);
}

// v[k] for a run-time k in 0..kMaxCorr, without indexing the register array at run time.
template <class V>
__device__ __forceinline__ V pick(const V (&v)[kMaxCorr + 1], int k) {
  V r = v[0];
#pragma unroll
  for (int j = 1; j <= kMaxCorr; ++j) {
    if (k == j) {
      r = v[j];
    }
  }
  return r;
}
template <class V>
__device__ __forceinline__ void put(V (&v)[kMaxCorr + 1], int k, V value) {
#pragma unroll
  for (int j = 1; j <= kMaxCorr; ++j) {
    if (k == j) {
      v[j] = value;
    }
  }
}

// row's channels c0 .. c0+valid-1 into cols[column][lane]; columns of lanes >= valid are zero.
template <class T>
__device__ __forceinline__ void gather_columns(const Block* blocks, int num_blocks, int num_columns,
                                               const T* __restrict__ row, int c0, int valid, int lane,
                                               T* cols) {
  for (int p = 0; p < num_blocks; ++p) {
    const Block b = blocks[p];
    const T* src = row + b.offset + c0 * b.dim;
    for (int v = lane; v < valid * b.dim; v += kWarp) {
      const int c = v / b.dim;
      cols[(b.base + v - c * b.dim) * kWarp + c] = __ldg(src + v);
    }
  }
  if (lane >= valid) {
    for (int i = 0; i < num_columns; ++i) {
      cols[i * kWarp + lane] = T(0);
    }
  }
}

// The inverse: cols[column][lane] back into row (NaN when !ok).
template <class T>
__device__ __forceinline__ void scatter_columns(const Block* blocks, int num_blocks, const T* cols, int c0,
                                                int valid, int lane, T* __restrict__ row, bool ok) {
  for (int p = 0; p < num_blocks; ++p) {
    const Block b = blocks[p];
    T* dst = row + b.offset + c0 * b.dim;
    for (int v = lane; v < valid * b.dim; v += kWarp) {
      const int c = v / b.dim;
      dst[v] = ok ? cols[(b.base + v - c * b.dim) * kWarp + c] : quiet_nan<T>();
    }
  }
}

__device__ __forceinline__ void stage_tables(uint4* smem, const uint4* __restrict__ src, int bytes) {
  for (int i = threadIdx.x; i < bytes / 16; i += blockDim.x) {
    smem[i] = __ldg(src + i);
  }
  __syncthreads();
}

// Coefficients of one lane, read one entry ahead so that the next load is in flight while the
// current one is used.
template <class T>
struct CoefStream {
  const T* ptr;  // coef[element][0][c]
  long long stride;
  int count;
  bool live;
  T next;
  __device__ __forceinline__ CoefStream(const T* p, long long s, int n, bool l)
      : ptr(p), stride(s), count(n), live(l) {
    next = live && count > 0 ? __ldg(ptr) : T(0);
  }
  __device__ __forceinline__ T take(int g) {
    const T c = next;
    if (live && g + 1 < count) {
      next = __ldg(ptr + (g + 1) * stride);
    }
    return c;
  }
};

template <class T>
__device__ __forceinline__ T* warp_scratch(uint4* smem, const SCArgs& a, int per_warp) {
  return reinterpret_cast<T*>(reinterpret_cast<unsigned char*>(smem) + a.table_bytes) +
         (threadIdx.x / kWarp) * per_warp;
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    sc_forward_kernel(const __grid_constant__ SCArgs a, const uint4* __restrict__ tables, int num_nodes,
                      const int* __restrict__ species, const T* __restrict__ x, const T* __restrict__ coef,
                      T* __restrict__ out) {
  extern __shared__ uint4 sc_smem[];
  stage_tables(sc_smem, tables, a.table_bytes);
  const int* walk = reinterpret_cast<const int*>(sc_smem);
  const int* column = walk + a.num_walk;
  const int lane = threadIdx.x % kWarp;
  T* xl = warp_scratch<T>(sc_smem, a, (a.num_ell + a.out_per_channel) * kWarp);
  T* acc = xl + a.num_ell * kWarp;
  const long long items = static_cast<long long>(num_nodes) * a.tiles;
  for (long long item = static_cast<long long>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
       item < items; item += static_cast<long long>(gridDim.x) * kWarpsPerBlock) {
    const int n = static_cast<int>(item / a.tiles);
    const int c0 = static_cast<int>(item % a.tiles) * kWarp;
    const int valid = min(kWarp, a.channels - c0);
    const int elem = species[n];
    const bool ok = elem >= 0 && elem < a.num_elements;
    gather_columns(a.in, a.num_in, a.num_ell, x + static_cast<long long>(n) * a.dim_in, c0, valid, lane, xl);
    for (int j = 0; j < a.out_per_channel; ++j) {
      acc[j * kWarp + lane] = T(0);
    }
    __syncwarp();
    CoefStream<T> cs(coef + static_cast<long long>(ok ? elem : 0) * a.num_entries * a.channels + c0 + lane,
                     a.channels, a.num_entries, ok && lane < valid);
    T p[kMaxCorr + 1] = {T(1)};
    int g = 0;
    for (int t = 0; t < a.num_walk; ++t) {
      const int word = walk[t];
      const int d = word & 7, i = (word >> 3) & 255, cnt = word >> 11;
      const T m = pick(p, d - 1) * xl[i * kWarp + lane];
      put(p, d, m);
      for (int z = 0; z < cnt; ++z, ++g) {
        const T c = cs.take(g);
        acc[column[g] * kWarp + lane] += c * m;
      }
    }
    __syncwarp();
    scatter_columns(a.out, a.num_out, acc, c0, valid, lane, out + static_cast<long long>(n) * a.dim_out, ok);
    __syncwarp();
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    sc_reverse_kernel(const __grid_constant__ SCArgs a, const uint4* __restrict__ tables, int num_nodes,
                      const int* __restrict__ species, const T* __restrict__ x, const T* __restrict__ coef,
                      const T* __restrict__ grad_out, T* __restrict__ grad_x) {
  extern __shared__ uint4 sc_smem[];
  stage_tables(sc_smem, tables, a.table_bytes);
  const int* walk = reinterpret_cast<const int*>(sc_smem);
  const int* column = walk + a.num_walk;
  const int lane = threadIdx.x % kWarp;
  T* xl = warp_scratch<T>(sc_smem, a, (2 * a.num_ell + a.out_per_channel) * kWarp);
  T* gxl = xl + a.num_ell * kWarp;
  T* go = gxl + a.num_ell * kWarp;
  const long long items = static_cast<long long>(num_nodes) * a.tiles;
  for (long long item = static_cast<long long>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
       item < items; item += static_cast<long long>(gridDim.x) * kWarpsPerBlock) {
    const int n = static_cast<int>(item / a.tiles);
    const int c0 = static_cast<int>(item % a.tiles) * kWarp;
    const int valid = min(kWarp, a.channels - c0);
    const int elem = species[n];
    const bool ok = elem >= 0 && elem < a.num_elements;
    gather_columns(a.in, a.num_in, a.num_ell, x + static_cast<long long>(n) * a.dim_in, c0, valid, lane, xl);
    gather_columns(a.out, a.num_out, a.out_per_channel, grad_out + static_cast<long long>(n) * a.dim_out, c0,
                   valid, lane, go);
    for (int i = 0; i < a.num_ell; ++i) {
      gxl[i * kWarp + lane] = T(0);
    }
    __syncwarp();
    CoefStream<T> cs(coef + static_cast<long long>(ok ? elem : 0) * a.num_entries * a.channels + c0 + lane,
                     a.channels, a.num_entries, ok && lane < valid);
    // The current path of the walk, by depth: prefix products p, the x factor and ell of each
    // level, and each level's gradient, complete once the walk leaves its subtree.
    T p[kMaxCorr + 1] = {T(1)}, xs[kMaxCorr + 1] = {}, gs[kMaxCorr + 1] = {};
    int ls[kMaxCorr + 1] = {};
    int cur = 0, g = 0;
    auto finish_levels_from = [&](int d) {
#pragma unroll
      for (int k = kMaxCorr; k >= 1; --k) {
        if (k >= d && k <= cur) {
          // d out / d x_last = gradient of the monomial times its prefix; the prefix gets the
          // gradient times x_last (the product rule, deepest level first).
          gxl[ls[k] * kWarp + lane] += gs[k] * p[k - 1];
          if (k > 1) {
            gs[k - 1] += gs[k] * xs[k];
          }
        }
      }
    };
    for (int t = 0; t < a.num_walk; ++t) {
      const int word = walk[t];
      const int d = word & 7, i = (word >> 3) & 255, cnt = word >> 11;
      finish_levels_from(d);
      const T xv = xl[i * kWarp + lane];
      const T m = pick(p, d - 1) * xv;
      T direct = T(0);
      for (int z = 0; z < cnt; ++z, ++g) {
        const T c = cs.take(g);
        direct += c * go[column[g] * kWarp + lane];
      }
      put(p, d, m);
      put(xs, d, xv);
      put(gs, d, direct);
      put(ls, d, i);
      cur = d;
    }
    finish_levels_from(1);
    __syncwarp();
    scatter_columns(a.in, a.num_in, gxl, c0, valid, lane, grad_x + static_cast<long long>(n) * a.dim_in, ok);
    __syncwarp();
  }
}

// partial[chunk][entry][c] = sum over the chunk's nodes of grad_out[n, column] * monomial.
template <class T>
__global__ void __launch_bounds__(kThreads)
    sc_grad_coef_kernel(const __grid_constant__ SCArgs a, const uint4* __restrict__ tables, int num_chunks,
                        const int2* __restrict__ chunks, const int* __restrict__ order,
                        const T* __restrict__ x, const T* __restrict__ grad_out, T* __restrict__ partial) {
  extern __shared__ uint4 sc_smem[];
  stage_tables(sc_smem, tables, a.table_bytes);
  const int* walk = reinterpret_cast<const int*>(sc_smem);
  const int* column = walk + a.num_walk;
  const int lane = threadIdx.x % kWarp;
  T* xl = warp_scratch<T>(sc_smem, a, (a.num_ell + a.out_per_channel) * kWarp);
  T* go = xl + a.num_ell * kWarp;
  const long long items = static_cast<long long>(num_chunks) * a.tiles;
  for (long long item = static_cast<long long>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
       item < items; item += static_cast<long long>(gridDim.x) * kWarpsPerBlock) {
    const int chunk = static_cast<int>(item / a.tiles);
    const int c0 = static_cast<int>(item % a.tiles) * kWarp;
    const int valid = min(kWarp, a.channels - c0);
    const bool active = lane < valid;
    const int2 range = chunks[chunk];
    T* dst = partial + static_cast<long long>(chunk) * a.num_entries * a.channels + c0 + lane;
    for (int k = range.x; k < range.y; ++k) {
      const int n = order[k];
      gather_columns(a.in, a.num_in, a.num_ell, x + static_cast<long long>(n) * a.dim_in, c0, valid, lane,
                     xl);
      gather_columns(a.out, a.num_out, a.out_per_channel, grad_out + static_cast<long long>(n) * a.dim_out,
                     c0, valid, lane, go);
      __syncwarp();
      T p[kMaxCorr + 1] = {T(1)};
      int g = 0;
      for (int t = 0; t < a.num_walk; ++t) {
        const int word = walk[t];
        const int d = word & 7, i = (word >> 3) & 255, cnt = word >> 11;
        const T m = pick(p, d - 1) * xl[i * kWarp + lane];
        put(p, d, m);
        for (int z = 0; z < cnt; ++z, ++g) {
          if (active) {
            // This lane owns the address: plain read-modify-write, first node stores.
            T* q = dst + static_cast<long long>(g) * a.channels;
            const T v = go[column[g] * kWarp + lane] * m;
            *q = k == range.x ? v : *q + v;
          }
        }
      }
      __syncwarp();
    }
  }
}

// grad_coef[e][entry][c] = sum of the partials of element e's chunks, in chunk order.
template <class T>
__global__ void sc_sum_chunks_kernel(long long total, long long per_element,
                                     const int* __restrict__ element_chunks, const T* __restrict__ partial,
                                     T* __restrict__ grad_coef) {
  for (long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<long long>(gridDim.x) * blockDim.x) {
    const int e = static_cast<int>(idx / per_element);
    const long long rest = idx - e * per_element;
    T s = T(0);
    for (int ch = element_chunks[e]; ch < element_chunks[e + 1]; ++ch) {
      s += partial[ch * per_element + rest];
    }
    grad_coef[idx] = s;
  }
}

// coef[e][p][c] = folded[e][perm[p]][c] for c < C: coefficients folded in the descriptor's entry
// order, with rows of `stride` channels, into the walk's order and unpadded rows.
template <class T>
__global__ void sc_gather_coef_kernel(long long total, int num_entries, int channels, int stride,
                                      const int* __restrict__ perm, const T* __restrict__ folded,
                                      T* __restrict__ coef) {
  for (long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<long long>(gridDim.x) * blockDim.x) {
    const int c = static_cast<int>(idx % channels);
    const long long row = idx / channels;
    const int p = static_cast<int>(row % num_entries);
    const long long e = row / num_entries;
    coef[idx] = folded[(e * num_entries + perm[p]) * stride + c];
  }
}

// ---------------------------------------------------------------------------------------------
// Host side.

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
      cudaFree(m_ptr);  // never throws from a destructor
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

template <class Kernel>
int prepare_kernel(Kernel kernel, int smem, int sms, int smem_optin, const char* name) {
  if (smem > smem_optin) {
    throw InputError(
        std::string("SymmetricContractionCuda: kernel ") + name + " needs " + std::to_string(smem) +
        " bytes of shared memory for this descriptor; the device allows " + std::to_string(smem_optin));
  }
  if (smem > 48 * 1024) {
    FASTMLIP_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  }
  int blocks = 0;
  FASTMLIP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kThreads, smem));
  return std::max(1, blocks) * sms;
}

unsigned grid_for(long long items, int cap) {
  const long long blocks = (items + kWarpsPerBlock - 1) / kWarpsPerBlock;
  return static_cast<unsigned>(std::max<long long>(1, std::min<long long>(blocks, cap)));
}

}  // namespace

template <class T>
struct SymmetricContractionCuda<T>::State {
  kernels::SymmetricContraction sc;
  SCArgs args{};
  std::vector<int> perm;  // walk-order entry p is descriptor entry perm[p]
  DeviceMemory tables;
  DeviceMemory perm_on_device;  // perm, for set_coefficients
  DeviceMemory coef;
  int num_elements = 0;
  int smem_fwd = 0, smem_rev = 0, smem_gcoef = 0;
  int cap_fwd = 1, cap_rev = 1, cap_gcoef = 1, sms = 1;
};

template <class T>
SymmetricContractionCuda<T>::SymmetricContractionCuda(const kernels::SymmetricContraction& sc)
    : m_state(std::make_unique<State>()) {
  State& st = *m_state;
  st.sc = sc;
  SCArgs& a = st.args;
  if (sc.num_ell > kMaxEll || static_cast<int>(sc.irreps_in.size()) > kMaxEntriesIO ||
      static_cast<int>(sc.irreps_out.size()) > kMaxEntriesIO || sc.correlation > kMaxCorr) {
    throw InputError("SymmetricContractionCuda: " + sc.irreps_in.str() + " -> " + sc.irreps_out.str() +
                     " at correlation " + std::to_string(sc.correlation) + " has " +
                     std::to_string(sc.num_ell) + " ells and " + std::to_string(sc.irreps_in.size()) + " + " +
                     std::to_string(sc.irreps_out.size()) + " irreps entries; the CUDA kernels hold up to " +
                     std::to_string(kMaxEll) + " ells, " + std::to_string(kMaxEntriesIO) +
                     " entries each way and correlation " + std::to_string(kMaxCorr));
  }
  a.channels = sc.channels;
  a.tiles = (sc.channels + kWarp - 1) / kWarp;
  a.num_ell = sc.num_ell;
  a.dim_in = sc.dim_in();
  a.dim_out = sc.dim_out();
  a.num_in = static_cast<int>(sc.irreps_in.size());
  a.num_out = static_cast<int>(sc.irreps_out.size());
  const auto off_in = sc.irreps_in.offsets();
  for (int p = 0, base = 0; p < a.num_in; ++p) {
    a.in[p] = Block{off_in[p], sc.irreps_in[p].ir.dim(), base};
    base += sc.irreps_in[p].ir.dim();
  }
  std::vector<int> local_base(a.num_out, 0);
  for (int o = 0, base = 0; o < a.num_out; ++o) {
    a.out[o] = Block{sc.out_offset(o), sc.irreps_out[o].ir.dim(), base};
    local_base[o] = base;
    base += sc.irreps_out[o].ir.dim();
    a.out_per_channel = base;
  }

  // The walk: monomials some entry reads, with their prefixes, in depth-first pre-order.
  const int num_mono = static_cast<int>(sc.monomials.size());
  std::vector<bool> needed(num_mono, false);
  std::vector<std::vector<int>> entries_of(num_mono), children(num_mono);
  std::vector<int> roots;
  for (int g = 0; g < static_cast<int>(sc.entries.size()); ++g) {
    entries_of[sc.entries[g].monomial].push_back(g);
    for (int t = sc.entries[g].monomial; t >= 0 && !needed[t]; t = sc.monomials[t].parent) {
      needed[t] = true;
    }
  }
  for (int t = 0; t < num_mono; ++t) {
    (sc.monomials[t].parent < 0 ? roots : children[sc.monomials[t].parent]).push_back(t);
  }
  std::vector<int> words, columns;
  std::function<void(int)> visit = [&](int t) {
    if (!needed[t]) {
      return;
    }
    const auto& mono = sc.monomials[t];
    if (static_cast<int>(entries_of[t].size()) > kMaxWalkCount) {
      throw InputError("SymmetricContractionCuda: monomial " + std::to_string(t) + " has " +
                       std::to_string(entries_of[t].size()) + " entries; the walk holds up to " +
                       std::to_string(kMaxWalkCount));
    }
    words.push_back(walk_word(mono.degree, mono.last, static_cast<int>(entries_of[t].size())));
    for (int g : entries_of[t]) {
      st.perm.push_back(g);
      const auto& en = sc.entries[g];
      columns.push_back(local_base[en.contraction] + en.m);
    }
    for (int c : children[t]) {
      visit(c);
    }
  };
  for (int r : roots) {
    visit(r);
  }
  a.num_walk = static_cast<int>(words.size());
  a.num_entries = static_cast<int>(columns.size());
  std::vector<int> blob = words;
  blob.insert(blob.end(), columns.begin(), columns.end());
  blob.resize((blob.size() + 3) / 4 * 4, 0);  // whole 16-byte words
  a.table_bytes = static_cast<int>(blob.size() * sizeof(int));

  const int col = kWarp * static_cast<int>(sizeof(T));
  st.smem_fwd = a.table_bytes + kWarpsPerBlock * (a.num_ell + a.out_per_channel) * col;
  st.smem_rev = a.table_bytes + kWarpsPerBlock * (2 * a.num_ell + a.out_per_channel) * col;
  st.smem_gcoef = st.smem_fwd;

  // Host-side checks and layout are done; from here on the device is needed.
  int dev = 0, smem_optin = 0;
  FASTMLIP_CUDA_CHECK(cudaGetDevice(&dev));
  FASTMLIP_CUDA_CHECK(cudaDeviceGetAttribute(&st.sms, cudaDevAttrMultiProcessorCount, dev));
  FASTMLIP_CUDA_CHECK(cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  st.tables = DeviceMemory(blob.size() * sizeof(int));
  if (!blob.empty()) {
    FASTMLIP_CUDA_CHECK(
        cudaMemcpy(st.tables.get(), blob.data(), blob.size() * sizeof(int), cudaMemcpyHostToDevice));
  }
  st.perm_on_device = DeviceMemory(st.perm.size() * sizeof(int));
  if (!st.perm.empty()) {
    FASTMLIP_CUDA_CHECK(cudaMemcpy(st.perm_on_device.get(), st.perm.data(), st.perm.size() * sizeof(int),
                                   cudaMemcpyHostToDevice));
  }
  st.cap_fwd = prepare_kernel(sc_forward_kernel<T>, st.smem_fwd, st.sms, smem_optin, "forward");
  st.cap_rev = prepare_kernel(sc_reverse_kernel<T>, st.smem_rev, st.sms, smem_optin, "reverse");
  st.cap_gcoef = prepare_kernel(sc_grad_coef_kernel<T>, st.smem_gcoef, st.sms, smem_optin, "weight gradient");
}

template <class T>
SymmetricContractionCuda<T>::~SymmetricContractionCuda() = default;
template <class T>
SymmetricContractionCuda<T>::SymmetricContractionCuda(SymmetricContractionCuda&&) noexcept = default;
template <class T>
SymmetricContractionCuda<T>& SymmetricContractionCuda<T>::operator=(SymmetricContractionCuda&&) noexcept =
    default;

template <class T>
const kernels::SymmetricContraction& SymmetricContractionCuda<T>::descriptor() const noexcept {
  return m_state->sc;
}

template <class T>
int SymmetricContractionCuda<T>::num_elements() const noexcept {
  return m_state->num_elements;
}

template <class T>
int SymmetricContractionCuda<T>::num_evaluated_monomials() const noexcept {
  return m_state->args.num_walk;
}

template <class T>
void SymmetricContractionCuda<T>::set_weights(const Nested& W, int num_elements) {
  State& st = *m_state;
  if (num_elements < 1) {
    throw InputError("SymmetricContractionCuda::set_weights: num_elements is " +
                     std::to_string(num_elements));
  }
  const std::vector<double> folded = st.sc.fold(W, num_elements);  // checks W's shapes
  const int G = st.args.num_entries, C = st.args.channels;
  std::vector<T> h(folded.size());
  for (int e = 0; e < num_elements; ++e) {
    for (int p = 0; p < G; ++p) {
      const std::size_t to = (static_cast<std::size_t>(e) * G + p) * C;
      const std::size_t from = (static_cast<std::size_t>(e) * G + st.perm[p]) * C;
      for (int c = 0; c < C; ++c) {
        h[to + c] = static_cast<T>(folded[from + c]);
      }
    }
  }
  DeviceMemory d(h.size() * sizeof(T));
  if (!h.empty()) {
    FASTMLIP_CUDA_CHECK(cudaMemcpy(d.get(), h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  st.coef = std::move(d);
  st.num_elements = num_elements;
  st.args.num_elements = num_elements;
}

namespace {

std::vector<int> download_species(const int* species, std::size_t num_nodes, cudaStream_t stream) {
  std::vector<int> h(num_nodes);
  if (num_nodes > 0) {
    FASTMLIP_CUDA_CHECK(
        cudaMemcpyAsync(h.data(), species, num_nodes * sizeof(int), cudaMemcpyDeviceToHost, stream));
    FASTMLIP_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  return h;
}

void check_labels(const std::vector<int>& h, int num_elements, const char* fn) {
  for (std::size_t n = 0; n < h.size(); ++n) {
    if (h[n] < 0 || h[n] >= num_elements) {
      throw InputError(std::string("SymmetricContractionCuda::") + fn + ": node " + std::to_string(n) +
                       " has element index " + std::to_string(h[n]) + "; the weights cover 0.." +
                       std::to_string(num_elements - 1));
    }
  }
}

void check_call(int num_elements, std::size_t num_nodes, const char* fn) {
  if (num_elements == 0) {
    throw InputError(std::string("SymmetricContractionCuda::") + fn + ": set_weights() was not called");
  }
  if (num_nodes > static_cast<std::size_t>(INT_MAX)) {
    throw InputError(std::string("SymmetricContractionCuda::") + fn + ": " + std::to_string(num_nodes) +
                     " nodes; at most " + std::to_string(INT_MAX) + " per call");
  }
}

void require(bool ok, const char* fn) {
  if (!ok) {
    throw InputError(std::string("SymmetricContractionCuda::") + fn +
                     ": a null pointer for a non-empty input");
  }
}

}  // namespace

template <class T>
void SymmetricContractionCuda<T>::set_coefficients(const T* coef, int stride, int num_elements,
                                                   void* stream) {
  State& st = *m_state;
  const int G = st.args.num_entries, C = st.args.channels;
  if (num_elements < 1 || stride < C) {
    throw InputError("SymmetricContractionCuda::set_coefficients: " + std::to_string(num_elements) +
                     " elements with a row stride of " + std::to_string(stride) +
                     "; need at least one element and " + std::to_string(C) + " channels per row");
  }
  const long long total = static_cast<long long>(num_elements) * G * C;
  require(total == 0 || coef != nullptr, "set_coefficients");
  if (num_elements != st.num_elements || st.coef.get() == nullptr) {
    st.coef = DeviceMemory(static_cast<std::size_t>(total) * sizeof(T));
  }
  if (total > 0) {
    const int threads = 256;
    const unsigned blocks = static_cast<unsigned>(
        std::min<long long>((total + threads - 1) / threads, static_cast<long long>(st.sms) * 16));
    sc_gather_coef_kernel<T><<<blocks, threads, 0, static_cast<cudaStream_t>(stream)>>>(
        total, G, C, stride, static_cast<const int*>(st.perm_on_device.get()), coef,
        static_cast<T*>(st.coef.get()));
    FASTMLIP_CUDA_CHECK_LAUNCH();
  }
  st.num_elements = num_elements;
  st.args.num_elements = num_elements;
}

template <class T>
void SymmetricContractionCuda<T>::check_species(const int* species, std::size_t num_nodes) const {
  check_call(m_state->num_elements, num_nodes, "check_species");
  require(num_nodes == 0 || species != nullptr, "check_species");
  check_labels(download_species(species, num_nodes, nullptr), m_state->num_elements, "check_species");
}

template <class T>
void SymmetricContractionCuda<T>::compute(const int* species, std::size_t num_nodes, const T* x, T* out,
                                          void* stream) const {
  const State& st = *m_state;
  check_call(st.num_elements, num_nodes, "compute");
  const long long items = static_cast<long long>(num_nodes) * st.args.tiles;
  if (items == 0) {
    return;
  }
  require(species != nullptr && x != nullptr && out != nullptr, "compute");
  sc_forward_kernel<T>
      <<<grid_for(items, st.cap_fwd), kThreads, st.smem_fwd, static_cast<cudaStream_t>(stream)>>>(
          st.args, static_cast<const uint4*>(st.tables.get()), static_cast<int>(num_nodes), species, x,
          static_cast<const T*>(st.coef.get()), out);
  FASTMLIP_CUDA_CHECK_LAUNCH();
}

template <class T>
void SymmetricContractionCuda<T>::reverse(const int* species, std::size_t num_nodes, const T* x,
                                          const T* grad_out, T* grad_x, void* stream) const {
  const State& st = *m_state;
  check_call(st.num_elements, num_nodes, "reverse");
  const long long items = static_cast<long long>(num_nodes) * st.args.tiles;
  if (items == 0) {
    return;
  }
  require(species != nullptr && x != nullptr && grad_out != nullptr && grad_x != nullptr, "reverse");
  sc_reverse_kernel<T>
      <<<grid_for(items, st.cap_rev), kThreads, st.smem_rev, static_cast<cudaStream_t>(stream)>>>(
          st.args, static_cast<const uint4*>(st.tables.get()), static_cast<int>(num_nodes), species, x,
          static_cast<const T*>(st.coef.get()), grad_out, grad_x);
  FASTMLIP_CUDA_CHECK_LAUNCH();
}

template <class T>
typename SymmetricContractionCuda<T>::Nested SymmetricContractionCuda<T>::reverse_weights(
    const int* species, std::size_t num_nodes, const T* x, const T* grad_out, void* stream) const {
  const State& st = *m_state;
  check_call(st.num_elements, num_nodes, "reverse_weights");
  require(num_nodes == 0 || (species != nullptr && x != nullptr && grad_out != nullptr), "reverse_weights");
  const auto s = static_cast<cudaStream_t>(stream);
  const int E = st.num_elements, G = st.args.num_entries, C = st.args.channels;
  const std::vector<int> label = download_species(species, num_nodes, s);
  check_labels(label, E, "reverse_weights");
  // Nodes grouped by element (ascending node ids within an element), cut into chunks.
  std::vector<int> count(E + 1, 0);
  for (int l : label) {
    ++count[l + 1];
  }
  for (int e = 0; e < E; ++e) {
    count[e + 1] += count[e];
  }
  std::vector<int> order(num_nodes), element_chunks(E + 1, 0);
  {
    std::vector<int> fill(count.begin(), count.end() - 1);
    for (std::size_t n = 0; n < num_nodes; ++n) {
      order[fill[label[n]]++] = static_cast<int>(n);
    }
  }
  std::vector<int2> chunks;
  for (int e = 0; e < E; ++e) {
    for (int b = count[e]; b < count[e + 1]; b += kNodesPerChunk) {
      chunks.push_back(int2{b, std::min(b + kNodesPerChunk, count[e + 1])});
    }
    element_chunks[e + 1] = static_cast<int>(chunks.size());
  }
  const long long per_element = static_cast<long long>(G) * C;
  const long long total = per_element * E;
  std::vector<T> h_grad(static_cast<std::size_t>(total), T(0));
  if (total > 0) {
    // One upload: order, element_chunks, then the chunks (int2, 8-byte aligned).
    std::vector<int> idx = order;
    idx.insert(idx.end(), element_chunks.begin(), element_chunks.end());
    idx.resize((idx.size() + 1) / 2 * 2, 0);
    const std::size_t chunk_at = idx.size();
    idx.resize(idx.size() + 2 * chunks.size());
    if (!chunks.empty()) {
      std::memcpy(idx.data() + chunk_at, chunks.data(), chunks.size() * sizeof(int2));
    }
    DeviceMemory d_idx(idx.size() * sizeof(int));
    DeviceMemory d_partial(chunks.size() * static_cast<std::size_t>(per_element) * sizeof(T));
    DeviceMemory d_grad(static_cast<std::size_t>(total) * sizeof(T));
    FASTMLIP_CUDA_CHECK(
        cudaMemcpyAsync(d_idx.get(), idx.data(), idx.size() * sizeof(int), cudaMemcpyHostToDevice, s));
    const int* d_order = static_cast<const int*>(d_idx.get());
    const int* d_element_chunks = d_order + num_nodes;
    const auto* d_chunks = reinterpret_cast<const int2*>(d_order + chunk_at);
    const long long items = static_cast<long long>(chunks.size()) * st.args.tiles;
    if (items > 0) {
      sc_grad_coef_kernel<T><<<grid_for(items, st.cap_gcoef), kThreads, st.smem_gcoef, s>>>(
          st.args, static_cast<const uint4*>(st.tables.get()), static_cast<int>(chunks.size()), d_chunks,
          d_order, x, grad_out, static_cast<T*>(d_partial.get()));
      FASTMLIP_CUDA_CHECK_LAUNCH();
    }
    const int threads = 256;
    const unsigned blocks = static_cast<unsigned>(
        std::min<long long>((total + threads - 1) / threads, static_cast<long long>(st.sms) * 16));
    sc_sum_chunks_kernel<T><<<blocks, threads, 0, s>>>(total, per_element, d_element_chunks,
                                                       static_cast<const T*>(d_partial.get()),
                                                       static_cast<T*>(d_grad.get()));
    FASTMLIP_CUDA_CHECK_LAUNCH();
    FASTMLIP_CUDA_CHECK(
        cudaMemcpyAsync(h_grad.data(), d_grad.get(), h_grad.size() * sizeof(T), cudaMemcpyDeviceToHost, s));
    // The host buffers above must outlive the copies, and the device buffers the kernels.
    FASTMLIP_CUDA_CHECK(cudaStreamSynchronize(s));
  }
  // Back to the descriptor's entry order, then unfold through U.
  std::vector<double> grad_coef(h_grad.size(), 0.0);
  for (int e = 0; e < E; ++e) {
    for (int p = 0; p < G; ++p) {
      const std::size_t from = (static_cast<std::size_t>(e) * G + p) * C;
      const std::size_t to = (static_cast<std::size_t>(e) * G + st.perm[p]) * C;
      for (int c = 0; c < C; ++c) {
        grad_coef[to + c] = static_cast<double>(h_grad[from + c]);
      }
    }
  }
  return st.sc.unfold_gradient(grad_coef, E);
}

template class SymmetricContractionCuda<float>;
template class SymmetricContractionCuda<double>;

}  // namespace fastmlip::cuda

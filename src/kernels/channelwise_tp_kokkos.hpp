// SPDX-License-Identifier: MIT
#pragma once
/// \file Kokkos backend of the channelwise tensor product (channelwise_tp.hpp), fused with the
/// gather of sender features and the scatter-sum into receivers.
#include <Kokkos_Core.hpp>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>

#include "core/error.hpp"
#include "kernels/backend.hpp"
#include "kernels/channelwise_tp.hpp"
#include "kernels/edge_index.hpp"
#include "kernels/impl/channelwise_tp_impl.hpp"
#include "kernels/impl/grow_buffer.hpp"
#include "kernels/impl/upload.hpp"
#include "kernels/radial_table_kokkos.hpp"
#include "math/dual.hpp"
#if defined(FASTMLIP_HAVE_CUDA)
#include "kernels/cuda/channelwise_tp_cuda.hpp"
#endif

namespace fastmlip::kernels {

/// Lanes: work items per node or edge row in the Kokkos functors (impl/channelwise_tp_impl.hpp):
/// 1 on the host, a warp on a GPU; tests pick others to check the lanes' arithmetic on the host.
template <class ExecSpace, class T, int Lanes = impl::kTPLanes<ExecSpace>>
class ChannelwiseTPKokkos {
  static_assert(is_kernel_scalar_v<T>, "ChannelwiseTPKokkos: T must be float, double or a Dual of them");
  using Functor = impl::ChannelwiseTPFunctor<ExecSpace, T, Lanes>;
  using Limits = impl::ChannelwiseTPLimits;

 public:
  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstMatrix = Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>;
  using Vector = Kokkos::View<T*, ExecSpace>;
  using ConstVector = Kokkos::View<const T*, ExecSpace>;

  /// `backend` (kernels/backend.hpp): Backend::cuda runs compute() and reverse() with weights
  /// per edge through the hand-written CUDA kernels (UnsupportedError where this build or
  /// execution space has none; InputError where the descriptor exceeds their limits);
  /// Backend::automatic (the default) picks them where they can run.
  explicit ChannelwiseTPKokkos(const ChannelwiseTP& tp, Backend backend = Backend::automatic) : m_tp(tp) {
    if (tp.dim2() > Limits::kMaxEdgeAttr) {
      throw InputError("ChannelwiseTPKokkos: edge attributes " + tp.irreps2.str() + " have " +
                       std::to_string(tp.dim2()) + " components; this build supports up to " +
                       std::to_string(Limits::kMaxEdgeAttr));
    }
    // Per-channel input layout: irreps1 entries one after another, (2 l1 + 1) each.
    m_entries1 = entries(tp.irreps1, "fastmlip::channelwise_tp::entries1");
    m_entries_out = entries(tp.irreps_out, "fastmlip::channelwise_tp::entries_out");
    Kokkos::View<impl::TPInstructionDev*, ExecSpace> ins("fastmlip::channelwise_tp::instructions", tp.instructions.size());
    Kokkos::View<impl::TPEntryDev<T>*, ExecSpace> cg("fastmlip::channelwise_tp::cg", tp.cg.size());
    auto h_ins = Kokkos::create_mirror_view(ins);
    auto h_cg = Kokkos::create_mirror_view(cg);
    for (std::size_t q = 0; q < tp.instructions.size(); ++q) {
      const auto& I = tp.instructions[q];
      h_ins(q) = impl::TPInstructionDev{I.mul,      2 * I.l1 + 1,  2 * I.l2 + 1,    2 * I.l3 + 1, I.offset1,
                                        I.offset2, I.offset_out, I.offset_weight, I.cg_begin,   I.cg_end};
    }
    for (std::size_t z = 0; z < tp.cg.size(); ++z) {
      h_cg(z) = impl::TPEntryDev<T>{tp.cg[z].i1, tp.cg[z].i2, tp.cg[z].i3, static_cast<T>(tp.cg[z].value)};
    }
    Kokkos::deep_copy(ins, h_ins);
    Kokkos::deep_copy(cg, h_cg);
    m_f.m_ins = ins;
    m_f.m_cg = cg;
    m_f.m_entries_out = m_entries_out;
    m_f.m_num_ins = static_cast<int>(tp.instructions.size());
    m_f.m_dim2 = tp.dim2();
    if constexpr (Functor::kSimd && Kokkos::SpaceAccessibility<ExecSpace, Kokkos::HostSpace>::accessible) {
      m_f.m_simd = &channelwise_tp_simd<T>();
    }
    if (impl::resolve<ExecSpace, T>(backend) == Backend::cuda) {
      if constexpr (impl::kCudaBackend<ExecSpace, T>) {
#if defined(FASTMLIP_HAVE_CUDA)
        try {
          m_cuda = std::make_shared<const CudaTP>(tp);
        } catch (const InputError&) {
          // Beyond the CUDA kernels' limits: an error when asked for by name, the Kokkos
          // path when chosen automatically.
          if (backend == Backend::cuda) {
            throw;
          }
        }
#endif
      } else {
        throw impl::no_cuda_backend("ChannelwiseTPKokkos", ExecSpace::name());
      }
    }
  }

  Backend backend() const noexcept { return m_cuda ? Backend::cuda : Backend::kokkos; }

  const ChannelwiseTP& descriptor() const noexcept { return m_tp; }

  /// out(n, :) = sum over edges into n of TP(x(sender), Y(e), w(e)), for the index's receivers
  /// (out has num_receivers rows, x num_nodes).
  void compute(const EdgeIndex<ExecSpace>& g, ConstMatrix x, ConstMatrix Y, ConstMatrix w, Matrix out) const {
    impl::check_shape("ChannelwiseTPKokkos", "compute", "w", w, g.num_edges, m_tp.weight_numel);
#if defined(FASTMLIP_HAVE_CUDA)
    if constexpr (impl::kCudaBackend<ExecSpace, T>) {
      if (m_cuda && impl::dense(x) && impl::dense(Y) && impl::dense(w) && impl::dense(out)) {
        check_forward(g, x, Y, out);
        // The forward kernel runs over nodes 0..num_nodes-1 as receivers: the receivers only.
        auto receivers = device_index(g);
        receivers.num_nodes = g.num_receivers;
        m_cuda->compute(receivers, x.data(), Y.data(), w.data(), out.data(), ExecSpace().cuda_stream());
        return;
      }
    }
#endif
    auto f = m_f;
    f.m_w = w;
    forward(f, g, x, Y, out);
  }

  /// As compute() with w[e, :] = table(r[e]), the table evaluated inside the kernel (no
  /// [edges x weight_numel] array). Throws InputError for an edge below the table.
  void compute(const EdgeIndex<ExecSpace>& g, ConstMatrix x, ConstMatrix Y, const RadialTableKokkos<ExecSpace, T>& table,
               ConstVector r, Matrix out) const {
    auto f = m_f;
    bind_table(f, "compute", g, table, r);
    forward(f, g, x, Y, out);
  }

  /// Gradients of sum(out * grad_out) with respect to x, Y and w.
  void reverse(const EdgeIndex<ExecSpace>& g, ConstMatrix x, ConstMatrix Y, ConstMatrix w, ConstMatrix grad_out,
               Matrix grad_x, Matrix grad_Y, Matrix grad_w) const {
    impl::check_shape("ChannelwiseTPKokkos", "reverse", "w", w, g.num_edges, m_tp.weight_numel);
    impl::check_shape("ChannelwiseTPKokkos", "reverse", "grad_w", grad_w, g.num_edges, m_tp.weight_numel);
#if defined(FASTMLIP_HAVE_CUDA)
    if constexpr (impl::kCudaBackend<ExecSpace, T>) {
      if (m_cuda && impl::dense(x) && impl::dense(Y) && impl::dense(w) && impl::dense(grad_out) &&
          impl::dense(grad_x) && impl::dense(grad_Y) && impl::dense(grad_w)) {
        check_backward(g, x, Y, grad_out, grad_x, grad_Y);
        m_cuda->reverse(device_index(g), x.data(), Y.data(), w.data(), grad_out.data(), grad_x.data(), grad_Y.data(),
                        grad_w.data(), ExecSpace().cuda_stream());
        return;
      }
    }
#endif
    auto f = m_f;
    f.m_w = w;
    f.m_grad_w = grad_w;
    backward(f, g, x, Y, grad_out, grad_x, grad_Y);
  }

  /// As reverse() with tabulated weights: grad_r[e] = sum_j grad_w[e, j] dR_j/dr (r[e]) takes
  /// the place of grad_w.
  void reverse(const EdgeIndex<ExecSpace>& g, ConstMatrix x, ConstMatrix Y, const RadialTableKokkos<ExecSpace, T>& table,
               ConstVector r, ConstMatrix grad_out, Matrix grad_x, Matrix grad_Y, Vector grad_r) const {
    if (grad_r.extent(0) != static_cast<std::size_t>(g.num_edges)) {
      throw InputError("ChannelwiseTPKokkos::reverse: grad_r has " + std::to_string(grad_r.extent(0)) +
                       " entries for " + std::to_string(g.num_edges) + " edges");
    }
    auto f = m_f;
    bind_table(f, "reverse", g, table, r);
    f.m_grad_r = grad_r;
    backward(f, g, x, Y, grad_out, grad_x, grad_Y);
  }

  /// The same sums as compute() and reverse() with weights per edge, run one chunk of edges at
  /// a time (EdgeIndex::chunk: the edges of a range of receivers), so that a caller never holds
  /// the per-edge arrays, the weights above all ([edges x weight_numel]), for more than one
  /// chunk. Forward: begin_chunks(x), then compute_chunk() for each chunk, which writes the
  /// rows of out of the chunk's receivers [first, last) only. Reverse: begin_reverse_chunks(x,
  /// grad_out), reverse_chunk() for each chunk (its rows of grad_Y and grad_w), then
  /// end_reverse_chunks(grad_x). Each receiver's edges lie in one chunk and each sender's are
  /// summed chunk after chunk, so with the chunks in edge order the Kokkos path's results are
  /// compute()'s and reverse()'s bit for bit. The CUDA kernels (backend() == cuda) run the
  /// chunks too: the same forward rows and edge gradients bit for bit, and each sender's
  /// grad_x summed per chunk, then over the chunks, so to round-off. They take x, grad_out and
  /// the per-edge arrays as dense row-major arrays (InputError otherwise).
  /// The calls of one pass share this object's buffers: no other call of it in between.
  void begin_chunks(ConstMatrix x) const {
    impl::check_shape("ChannelwiseTPKokkos", "begin_chunks", "x", x, x.extent(0), m_tp.dim1());
    Matrix xT = m_xT.get(static_cast<int>(x.extent(0)), m_tp.dim1());
    if (m_cuda) {
      Kokkos::deep_copy(ExecSpace(), xT, x);  // the CUDA kernels read x in e3nn's layout
      return;
    }
    transpose<typename Transpose::TagToIrMul>("fastmlip::channelwise_tp::x_to_ir_mul", m_entries1, x, xT);
  }
  void compute_chunk(const EdgeIndex<ExecSpace>& chunk, int first, int last, ConstMatrix Y, ConstMatrix w,
                     Matrix out) const {
    impl::check_shape("ChannelwiseTPKokkos", "compute_chunk", "w", w, chunk.num_edges, m_tp.weight_numel);
    impl::check_shape("ChannelwiseTPKokkos", "compute_chunk", "Y", Y, chunk.num_edges, m_tp.dim2());
    impl::check_shape("ChannelwiseTPKokkos", "compute_chunk", "out", out, chunk.num_receivers,
                      m_tp.dim_out());
    check_chunk("compute_chunk", chunk.num_receivers, first, last);
#if defined(FASTMLIP_HAVE_CUDA)
    if constexpr (impl::kCudaBackend<ExecSpace, T>) {
      if (m_cuda) {
        require_dense("compute_chunk", impl::dense(Y) && impl::dense(w) && impl::dense(out));
        // A window on the chunk's receivers [first, last): their edges, their rows of out.
        auto window = device_index(chunk);
        window.receiver_ptr += first;
        window.num_nodes = last - first;
        m_cuda->compute(window, m_xT.get(chunk.num_nodes, m_tp.dim1()).data(), Y.data(), w.data(),
                        out.data() + static_cast<std::size_t>(first) * m_tp.dim_out(),
                        ExecSpace().cuda_stream());
        return;
      }
    }
#endif
    auto f = m_f;
    f.m_w = w;
    run_forward(f, chunk, first, last, Y, out);
  }
  void begin_reverse_chunks(ConstMatrix x, ConstMatrix grad_out) const {
    const int N = static_cast<int>(x.extent(0)), R = static_cast<int>(grad_out.extent(0));
    impl::check_shape("ChannelwiseTPKokkos", "begin_reverse_chunks", "x", x, N, m_tp.dim1());
    impl::check_shape("ChannelwiseTPKokkos", "begin_reverse_chunks", "grad_out", grad_out, R, m_tp.dim_out());
    Matrix xT = m_xT.get(N, m_tp.dim1());
    Matrix gT = m_outT.get(R, m_tp.dim_out());
    Kokkos::deep_copy(m_gxT.get(N, m_tp.dim1()), T(0));
    if (m_cuda) {  // copies in e3nn's layout, and grad_x's running sum there
      Kokkos::deep_copy(ExecSpace(), xT, x);
      Kokkos::deep_copy(ExecSpace(), gT, grad_out);
      return;
    }
    transpose<typename Transpose::TagToIrMul>("fastmlip::channelwise_tp::x_to_ir_mul", m_entries1, x, xT);
    transpose<typename Transpose::TagToIrMul>("fastmlip::channelwise_tp::grad_out_to_ir_mul", m_entries_out,
                                              grad_out, gT);
  }
  void reverse_chunk(const EdgeIndex<ExecSpace>& chunk, ConstMatrix Y, ConstMatrix w, Matrix grad_Y,
                     Matrix grad_w) const {
    const int E = chunk.num_edges;
    impl::check_shape("ChannelwiseTPKokkos", "reverse_chunk", "w", w, E, m_tp.weight_numel);
    impl::check_shape("ChannelwiseTPKokkos", "reverse_chunk", "grad_w", grad_w, E, m_tp.weight_numel);
    impl::check_shape("ChannelwiseTPKokkos", "reverse_chunk", "Y", Y, E, m_tp.dim2());
    impl::check_shape("ChannelwiseTPKokkos", "reverse_chunk", "grad_Y", grad_Y, E, m_tp.dim2());
#if defined(FASTMLIP_HAVE_CUDA)
    if constexpr (impl::kCudaBackend<ExecSpace, T>) {
      if (m_cuda) {
        require_dense("reverse_chunk",
                      impl::dense(Y) && impl::dense(w) && impl::dense(grad_Y) && impl::dense(grad_w));
        const int N = chunk.num_nodes;
        m_cuda->reverse_accumulate(device_index(chunk), m_xT.get(N, m_tp.dim1()).data(), Y.data(), w.data(),
                                   m_outT.get(chunk.num_receivers, m_tp.dim_out()).data(),
                                   m_gxT.get(N, m_tp.dim1()).data(), grad_Y.data(), grad_w.data(),
                                   ExecSpace().cuda_stream());
        return;
      }
    }
#endif
    auto f = m_f;
    f.m_w = w;
    f.m_grad_w = grad_w;
    run_reverse(f, chunk, Y, grad_Y);
  }
  void end_reverse_chunks(Matrix grad_x) const {
    const int N = static_cast<int>(grad_x.extent(0));
    impl::check_shape("ChannelwiseTPKokkos", "end_reverse_chunks", "grad_x", grad_x, N, m_tp.dim1());
    if (m_cuda) {
      Kokkos::deep_copy(ExecSpace(), grad_x, m_gxT.get(N, m_tp.dim1()));
      return;
    }
    transpose<typename Transpose::TagFromIrMul>("fastmlip::channelwise_tp::grad_x_from_ir_mul", m_entries1,
                                                m_gxT.get(N, m_tp.dim1()), grad_x);
  }

 private:
  static void require_dense(const char* fn, bool dense) {
    if (!dense) {
      throw InputError(std::string("ChannelwiseTPKokkos::") + fn +
                       ": the CUDA kernels take dense row-major arrays; pass contiguous rows");
    }
  }
  void check_chunk(const char* fn, int N, int first, int last) const {
    if (first < 0 || last < first || last > N) {
      throw InputError(std::string("ChannelwiseTPKokkos::") + fn + ": receivers [" + std::to_string(first) +
                       ", " + std::to_string(last) + ") outside the index's " + std::to_string(N) + " nodes");
    }
  }

  // The hand-written kernels behind Backend::cuda (kernels/cuda/channelwise_tp_cuda.hpp), where
  // this build has them for ExecSpace and T; shared, as the class is copied by value.
#if defined(FASTMLIP_HAVE_CUDA)
  using CudaTP = std::conditional_t<impl::kCudaBackend<ExecSpace, T>, cuda::ChannelwiseTPCuda<T>, void>;
#else
  using CudaTP = void;
#endif
  std::shared_ptr<const CudaTP> m_cuda;

#if defined(FASTMLIP_HAVE_CUDA)
  static cuda::EdgeIndexDevice device_index(const EdgeIndex<ExecSpace>& g) {
    cuda::EdgeIndexDevice d;
    d.num_nodes = g.num_nodes;
    d.num_edges = g.num_edges;
    d.receiver_ptr = g.receiver_ptr.data();
    d.sender = g.sender.data();
    d.receiver = g.receiver.data();
    d.sender_ptr = g.sender_ptr.data();
    d.sender_edges = g.sender_edges.data();
    return d;
  }
#endif
  // The shapes every path checks: the Kokkos functors' (forward / backward) and the CUDA kernels'.
  void check_forward(const EdgeIndex<ExecSpace>& g, ConstMatrix x, ConstMatrix Y, ConstMatrix out) const {
    impl::check_shape("ChannelwiseTPKokkos", "compute", "x", x, g.num_nodes, m_tp.dim1());
    impl::check_shape("ChannelwiseTPKokkos", "compute", "Y", Y, g.num_edges, m_tp.dim2());
    impl::check_shape("ChannelwiseTPKokkos", "compute", "out", out, g.num_receivers, m_tp.dim_out());
  }
  void check_backward(const EdgeIndex<ExecSpace>& g, ConstMatrix x, ConstMatrix Y, ConstMatrix grad_out,
                      ConstMatrix grad_x, ConstMatrix grad_Y) const {
    impl::check_shape("ChannelwiseTPKokkos", "reverse", "x", x, g.num_nodes, m_tp.dim1());
    impl::check_shape("ChannelwiseTPKokkos", "reverse", "Y", Y, g.num_edges, m_tp.dim2());
    impl::check_shape("ChannelwiseTPKokkos", "reverse", "grad_out", grad_out, g.num_receivers,
                      m_tp.dim_out());
    impl::check_shape("ChannelwiseTPKokkos", "reverse", "grad_x", grad_x, g.num_nodes, m_tp.dim1());
    impl::check_shape("ChannelwiseTPKokkos", "reverse", "grad_Y", grad_Y, g.num_edges, m_tp.dim2());
  }

  void bind_table(Functor& f, const char* fn, const EdgeIndex<ExecSpace>& g, const RadialTableKokkos<ExecSpace, T>& table,
                  ConstVector r) const {
    if (table.width() != m_tp.weight_numel || r.extent(0) != static_cast<std::size_t>(g.num_edges)) {
      throw InputError(std::string("ChannelwiseTPKokkos::") + fn + ": the radial table gives " +
                       std::to_string(table.width()) + " weights per edge for " + std::to_string(r.extent(0)) +
                       " edges; expected " + std::to_string(m_tp.weight_numel) + " for " + std::to_string(g.num_edges));
    }
    for (const auto& I : m_tp.instructions) {
      if (I.mul > impl::ChannelwiseTPLimits::kMaxTabulatedMul) {
        throw InputError(std::string("ChannelwiseTPKokkos::") + fn + ": " + std::to_string(I.mul) +
                         " channels per path; tabulated weights support up to " +
                         std::to_string(impl::ChannelwiseTPLimits::kMaxTabulatedMul));
      }
    }
    table.check(r);
    f.m_table = table.table();
    f.m_r = r;
  }

  // A whole index is one chunk: the ir_mul copies of the inputs, the kernels over every
  // receiver (forward) or every sender and edge (reverse), the outputs back to e3nn's layout.
  void forward(Functor& f, const EdgeIndex<ExecSpace>& g, ConstMatrix x, ConstMatrix Y, Matrix out) const {
    check_forward(g, x, Y, out);
    begin_chunks(x);
    run_forward(f, g, 0, g.num_receivers, Y, out);
  }

  void backward(Functor& f, const EdgeIndex<ExecSpace>& g, ConstMatrix x, ConstMatrix Y, ConstMatrix grad_out,
                Matrix grad_x, Matrix grad_Y) const {
    check_backward(g, x, Y, grad_out, grad_x, grad_Y);
    begin_reverse_chunks(x, grad_out);
    run_reverse(f, g, Y, grad_Y);
    end_reverse_chunks(grad_x);
  }

  /// The forward kernel over receivers [first, last) of g, from the ir_mul copy of x that
  /// begin_chunks made, and those rows of out.
  void run_forward(Functor& f, const EdgeIndex<ExecSpace>& g, int first, int last, ConstMatrix Y,
                   Matrix out) const {
    f.m_graph = g;
    f.m_Y = Y;
    f.m_xT = m_xT.get(g.num_nodes, m_tp.dim1());
    f.m_outT = m_outT.get(g.num_receivers, m_tp.dim_out());
    Kokkos::parallel_for(
        "fastmlip::channelwise_tp::forward",
        Kokkos::RangePolicy<ExecSpace, typename Functor::TagForward>(work_items(first), work_items(last)), f);
    transpose<typename Transpose::TagFromIrMul>("fastmlip::channelwise_tp::out_from_ir_mul", m_entries_out,
                                                f.m_outT, out, first, last);
  }

  /// The reverse kernels of g (every sender's share of grad_x into the running ir_mul sum,
  /// every edge's grad_Y and grad_w or grad_r), from begin_reverse_chunks' copies.
  void run_reverse(Functor& f, const EdgeIndex<ExecSpace>& g, ConstMatrix Y, Matrix grad_Y) const {
    const int N = g.num_nodes;
    f.m_graph = g;
    f.m_Y = Y;
    f.m_grad_Y = grad_Y;
    f.m_xT = m_xT.get(N, m_tp.dim1());
    f.m_gT = m_outT.get(g.num_receivers, m_tp.dim_out());
    f.m_grad_xT = m_gxT.get(N, m_tp.dim1());
    if constexpr (Lanes > 1) {  // the lanes add their shares into these
      Kokkos::deep_copy(grad_Y, T(0));
      if (f.m_grad_r.extent(0) > 0) {
        Kokkos::deep_copy(f.m_grad_r, T(0));
      }
    }
    if constexpr (Lanes == 1) {
      // One pass over the edges, from their senders (impl::ChannelwiseTPFunctor::TagReverseFused).
      Kokkos::parallel_for("fastmlip::channelwise_tp::reverse_fused",
                           Kokkos::RangePolicy<ExecSpace, typename Functor::TagReverseFused>(0, N), f);
      return;
    }
    Kokkos::parallel_for("fastmlip::channelwise_tp::reverse_sender",
                         Kokkos::RangePolicy<ExecSpace, typename Functor::TagReverseSender>(0, work_items(N)),
                         f);
    Kokkos::parallel_for(
        "fastmlip::channelwise_tp::reverse_edge",
        Kokkos::RangePolicy<ExecSpace, typename Functor::TagReverseEdge>(0, work_items(g.num_edges)), f);
  }

  // Rows times lanes, the functors' work items, as an int.
  static int work_items(int rows) {
    if (static_cast<long long>(rows) * Lanes > std::numeric_limits<int>::max()) {
      throw UnsupportedError("ChannelwiseTPKokkos: " + std::to_string(rows) + " rows of " +
                             std::to_string(Lanes) +
                             " lanes each exceed the kernels' int index; split the system over more ranks");
    }
    return rows * Lanes;
  }

  using Transpose = impl::IrMulTranspose<ExecSpace, T>;
  static Kokkos::View<const impl::IrrepEntryDev*, ExecSpace> entries(const Irreps& irreps, const char* label) {
    std::vector<impl::IrrepEntryDev> v;
    int offset = 0;
    for (std::size_t k = 0; k < irreps.size(); ++k) {
      v.push_back({offset, irreps[k].mul, irreps[k].ir.dim()});
      offset += irreps[k].mul * irreps[k].ir.dim();
    }
    return impl::upload<ExecSpace>(v, label);
  }
  /// Rows [first, last) of src into dst between e3nn's layout and ir_mul (all rows by default).
  template <class Tag>
  static void transpose(const char* label, Kokkos::View<const impl::IrrepEntryDev*, ExecSpace> entries,
                        ConstMatrix src, Matrix dst, int first = 0, int last = -1) {
    Transpose t{entries, src, dst};
    Kokkos::parallel_for(
        label, Kokkos::RangePolicy<ExecSpace, Tag>(first, last < 0 ? static_cast<int>(src.extent(0)) : last),
        t);
  }

  ChannelwiseTP m_tp;
  Functor m_f;
  Kokkos::View<const impl::IrrepEntryDev*, ExecSpace> m_entries1, m_entries_out;
  // The ir_mul copies of one call, reused by the next (impl/grow_buffer.hpp): one object's calls
  // must not overlap, as in a model, which calls its layers' kernels one after another.
  mutable impl::GrowBuffer<T, ExecSpace> m_xT{"fastmlip::channelwise_tp::xT"},
      m_outT{"fastmlip::channelwise_tp::outT"}, m_gxT{"fastmlip::channelwise_tp::grad_xT"};
};

}  // namespace fastmlip::kernels

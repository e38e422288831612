// SPDX-License-Identifier: MIT
#pragma once
/// \file cuBLAS's column-major GEMM as the Gemm policy of impl::RadialMLPLayers (the radial
/// MLP's 'cuda' backend), callable from plain C++ (no CUDA headers). Built where CMake found
/// cuBLAS beside the CUDA toolkit (FASTMLIP_HAVE_CUBLAS).
#include <memory>

namespace fastmlip::cuda {

/// C = op(A) op(B) + beta C on the GPU, as BLAS's xGEMM with alpha = 1, for R = float or double.
/// One cuBLAS handle, bound to one stream; copies share it. The products run in R's own
/// precision: cuBLAS' default math mode, never TF32 tensor cores, which would round a float32
/// model's operands to 10 bits of mantissa.
template <class R>
class CublasGemm {
 public:
  /// A handle on the current device, its work on `stream` (a cudaStream_t; null: the default
  /// stream). Throws fastmlip::Error, with cuBLAS' reason, where cuBLAS cannot start (no GPU).
  explicit CublasGemm(void* stream = nullptr);

  /// Asynchronous on the handle's stream; a call cuBLAS refuses throws fastmlip::Error.
  void operator()(bool trans_a, bool trans_b, int m, int n, int k, const R* A, int lda, const R* B, int ldb,
                  R beta, R* C, int ldc) const;

 private:
  struct Handle;
  std::shared_ptr<Handle> m_handle;
};

}  // namespace fastmlip::cuda

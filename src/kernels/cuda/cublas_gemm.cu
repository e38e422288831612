// SPDX-License-Identifier: MIT
#include <cublas_v2.h>

#include <string>
#include <type_traits>

#include "core/error.hpp"
#include "kernels/cuda/cublas_gemm.hpp"

namespace fastmlip::cuda {

namespace {

void check(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw Error(std::string("cuBLAS call ") + call + " failed: " + cublasGetStatusName(status) + " (" +
                cublasGetStatusString(status) + ")");
  }
}

}  // namespace

template <class R>
struct CublasGemm<R>::Handle {
  cublasHandle_t h = nullptr;
  Handle() = default;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() {
    if (h != nullptr) {
      cublasDestroy(h);
    }
  }
};

template <class R>
CublasGemm<R>::CublasGemm(void* stream) : m_handle(std::make_shared<Handle>()) {
  check(cublasCreate(&m_handle->h), "cublasCreate");
  check(cublasSetStream(m_handle->h, static_cast<cudaStream_t>(stream)), "cublasSetStream");
  check(cublasSetMathMode(m_handle->h, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
}

template <class R>
void CublasGemm<R>::operator()(bool trans_a, bool trans_b, int m, int n, int k, const R* A, int lda,
                               const R* B, int ldb, R beta, R* C, int ldc) const {
  const R one = 1;
  const cublasOperation_t ta = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  if constexpr (std::is_same_v<R, float>) {
    check(cublasSgemm(m_handle->h, ta, tb, m, n, k, &one, A, lda, B, ldb, &beta, C, ldc), "cublasSgemm");
  } else {
    check(cublasDgemm(m_handle->h, ta, tb, m, n, k, &one, A, lda, B, ldb, &beta, C, ldc), "cublasDgemm");
  }
}

template class CublasGemm<float>;
template class CublasGemm<double>;

}  // namespace fastmlip::cuda

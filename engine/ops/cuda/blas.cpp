// cuBLAS through dlopen: the handle, its stream, and GemmEx / GemmStridedBatchedEx in the
// row-major NT form of blas.h.
#include "engine/ops/cuda/blas.h"

#include <dlfcn.h>

#include <cublas_v2.h>

#include <mutex>
#include <string>

#include "engine/ops/cuda/cuda_handles.h"

namespace flashdesk::cuda {
namespace {

// The few entry points used, resolved once per process.
struct CublasApi {
  using Create = cublasStatus_t (*)(cublasHandle_t*);
  using Destroy = cublasStatus_t (*)(cublasHandle_t);
  using SetStream = cublasStatus_t (*)(cublasHandle_t, cudaStream_t);
  using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                    int, const void*, const void*, cudaDataType, int, const void*,
                                    cudaDataType, int, const void*, void*, cudaDataType, int,
                                    cublasComputeType_t, cublasGemmAlgo_t);
  using GemmBatched = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                         int, int, const void*, const void*, cudaDataType, int,
                                         long long, const void*, cudaDataType, int, long long,
                                         const void*, void*, cudaDataType, int, long long, int,
                                         cublasComputeType_t, cublasGemmAlgo_t);
  Create create = nullptr;
  Destroy destroy = nullptr;
  SetStream set_stream = nullptr;
  GemmEx gemm = nullptr;
  GemmBatched gemm_batched = nullptr;
};

void* open_cublas(std::string& tried) {
  const char* names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so",
                         FLASHDESK_CUBLAS_DIR "/libcublas.so.13",
                         FLASHDESK_CUBLAS_DIR "/libcublas.so"};
  for (const char* n : names) {
    if (void* h = dlopen(n, RTLD_NOW | RTLD_LOCAL)) return h;
    tried += std::string(tried.empty() ? "" : "; ") + n + ": " + dlerror();
  }
  return nullptr;
}

const CublasApi& cublas_api() {
  static CublasApi api;
  static std::once_flag once;
  static std::string error;
  std::call_once(once, [] {
    std::string tried;
    void* lib = open_cublas(tried);
    if (!lib) {
      error = "cuBLAS could not be loaded (" + tried + ")";
      return;
    }
    auto sym = [&](const char* name) {
      void* p = dlsym(lib, name);
      if (!p && error.empty()) error = std::string("cuBLAS has no ") + name;
      return p;
    };
    api.create = reinterpret_cast<CublasApi::Create>(sym("cublasCreate_v2"));
    api.destroy = reinterpret_cast<CublasApi::Destroy>(sym("cublasDestroy_v2"));
    api.set_stream = reinterpret_cast<CublasApi::SetStream>(sym("cublasSetStream_v2"));
    api.gemm = reinterpret_cast<CublasApi::GemmEx>(sym("cublasGemmEx"));
    api.gemm_batched = reinterpret_cast<CublasApi::GemmBatched>(sym("cublasGemmStridedBatchedEx"));
  });
  if (!error.empty()) throw CudaError(error);
  return api;
}

}  // namespace

Blas::~Blas() {
  if (handle_) cublas_api().destroy(static_cast<cublasHandle_t>(handle_));
}

void Blas::ensure_handle() {
  if (handle_) return;
  const CublasApi& api = cublas_api();
  DeviceGuard guard(device_);
  cublasHandle_t h = nullptr;
  FD_CUBLAS_CHECK(api.create(&h));
  handle_ = h;
  FD_CUBLAS_CHECK(api.set_stream(h, stream_));
}

void Blas::use_stream(cudaStream_t stream) {
  if (stream == stream_) return;
  stream_ = stream;
  if (handle_)
    FD_CUBLAS_CHECK(cublas_api().set_stream(static_cast<cublasHandle_t>(handle_), stream_));
}

void Blas::issue_gemm(const GemmArgs& a) {
  ensure_handle();
  const CublasApi& api = cublas_api();
  auto h = static_cast<cublasHandle_t>(handle_);
  const cudaDataType t = a.in == GemmInput::Bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const cudaDataType yt = a.out == GemmOutput::Bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const float one = 1.0f, zero = 0.0f;
  // Column-major view: Y^T [cols, rows] = W [cols, k] . X^T [k, rows], i.e. op(A) = W^T read
  // transposed from its row-major storage, B = X^T read as is.
  const int m = static_cast<int>(a.cols), n = static_cast<int>(a.rows), k = static_cast<int>(a.k);
  if (a.batch == 1) {
    FD_CUBLAS_CHECK(api.gemm(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, a.w, t,
                             static_cast<int>(a.ldw), a.x, t, static_cast<int>(a.ldx), &zero, a.y,
                             yt, static_cast<int>(a.ldy), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return;
  }
  FD_CUBLAS_CHECK(api.gemm_batched(
      h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, a.w, t, static_cast<int>(a.ldw), a.stride_w, a.x,
      t, static_cast<int>(a.ldx), a.stride_x, &zero, a.y, yt, static_cast<int>(a.ldy), a.stride_y,
      static_cast<int>(a.batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace flashdesk::cuda

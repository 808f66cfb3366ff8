// The check every CUDA runtime and cuBLAS call of the CUDA backend goes through: a failure throws
// CudaError naming the call, the error and the file and line of the call.
#pragma once

#include <string>

#include "engine/util/error.h"

namespace flashdesk {

// A CUDA or cuBLAS call failed (no device, out of memory, a kernel fault). Derived from Error so
// the engine API shows it to the user instead of crashing.
class CudaError : public Error {
 public:
  using Error::Error;
};

namespace cuda {

[[noreturn]] void cuda_call_failed(int code, const char* name, const char* text, const char* call,
                                   const char* file, int line);
[[noreturn]] void cublas_call_failed(int status, const char* call, const char* file, int line);

}  // namespace cuda
}  // namespace flashdesk

// cudaError_t is an enum in both the real and the emulated runtime; codes are compared as ints.
#define FD_CUDA_CHECK(expr)                                                     \
  do {                                                                          \
    const auto fd_cuda_status_ = (expr);                                        \
    if (fd_cuda_status_ != cudaSuccess)                                         \
      ::flashdesk::cuda::cuda_call_failed(                                      \
          static_cast<int>(fd_cuda_status_), cudaGetErrorName(fd_cuda_status_), \
          cudaGetErrorString(fd_cuda_status_), #expr, __FILE__, __LINE__);      \
  } while (0)

#define FD_CUBLAS_CHECK(expr)                                                              \
  do {                                                                                     \
    const int fd_cublas_status_ = static_cast<int>(expr);                                  \
    if (fd_cublas_status_ != 0)                                                            \
      ::flashdesk::cuda::cublas_call_failed(fd_cublas_status_, #expr, __FILE__, __LINE__); \
  } while (0)
